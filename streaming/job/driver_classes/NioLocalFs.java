package zkcdc.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * `file:` for Hadoop's FileContext (what Spark's checkpoint file manager uses), as
 * org.apache.hadoop.fs.local.LocalFs is, over {@link NioLocalFileSystem.Raw}.
 */
public class NioLocalFs extends ChecksumFs {
    public NioLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(uri, conf));
    }

    /** org.apache.hadoop.fs.local.RawLocalFs over the java.nio raw file system. */
    public static class Raw extends DelegateToFileSystem {
        public Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new NioLocalFileSystem.Raw(), conf, FsConstants.LOCAL_FS_URI.getScheme(),
                false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        @Deprecated
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public boolean isValidName(String src) {
            return true;
        }
    }
}
