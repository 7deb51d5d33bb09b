package zkcdc.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksummed, as `file:` is by default) that asks java.nio for
 * permissions and symbolic links. Without Hadoop's native library, which pyspark does not ship,
 * each file a checkpoint writes costs five forked processes (a `chmod`, and a `readlink` each
 * time the file or its temporary is looked at): ~50 ms a file on a busy 2-core machine, several
 * files a micro-batch (offsets, commits, each state store's changelog).
 */
public class NioLocalFileSystem extends LocalFileSystem {
    public NioLocalFileSystem() {
        super(new Raw());
    }

    /** The raw file system below the checksums: only these two methods differ. */
    public static class Raw extends RawLocalFileSystem {
        private static final PosixFilePermission[] BITS = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
            PosixFilePermission.OWNER_READ,
        };

        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            short mode = permission.toShort();
            if ((mode & ~0777) != 0) {
                super.setPermission(p, permission); // a sticky bit: java.nio cannot say it
                return;
            }
            Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
            for (int bit = 0; bit < BITS.length; bit++) {
                if ((mode & (1 << bit)) != 0) {
                    set.add(BITS[bit]);
                }
            }
            Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
        }

        @Override
        public FileStatus getFileLinkStatus(Path f) throws IOException {
            if (Files.isSymbolicLink(pathToFile(f).toPath())) {
                return super.getFileLinkStatus(f);
            }
            return getFileStatus(f); // what Hadoop returns once its `readlink` says "no link"
        }
    }
}
