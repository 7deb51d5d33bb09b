package zkcdc.spark;

import java.lang.reflect.Method;
import java.util.Map;

import org.apache.spark.TaskContext;
import org.apache.spark.TaskFailedReason;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.apache.spark.sql.internal.ReadOnlySQLConf;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.internal.SQLConf$;

/**
 * One SQL configuration per task instead of one per question. Inside a task, Spark 4.2's
 * {@code SQLConf.get} builds a new {@link ReadOnlySQLConf} (binding every system property and
 * environment variable) unless the thread holds one, and a nested row asks it whether the
 * types framework is on once for each of its fields: the Avro reader builds one for every
 * nested record it decodes, and that was a third of a lake backfill's CPU. This plugin gives
 * each task thread the conf Spark would build, built once when the task starts (a task's
 * settings do not change while it runs) with that one answer kept, and takes it away when the
 * task ends.
 */
public final class TaskSqlConf implements SparkPlugin {
    @Override
    public DriverPlugin driverPlugin() {
        return null;
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new PerTask();
    }

    static final class PerTask implements ExecutorPlugin {
        private ThreadLocal<SQLConf> held;

        @Override
        @SuppressWarnings("unchecked")
        public void init(PluginContext context, Map<String, String> extraConf) {
            try {
                Method existing = SQLConf$.class.getDeclaredMethod("existingConf");
                existing.setAccessible(true);
                held = (ThreadLocal<SQLConf>) existing.invoke(SQLConf$.MODULE$);
            } catch (ReflectiveOperationException | RuntimeException e) {
                held = null; // another Spark: its own SQLConf.get, as without the plugin
            }
        }

        @Override
        public void onTaskStart() {
            TaskContext task = TaskContext.get();
            if (held != null && task != null) {
                held.set(new TaskConf(task));
            }
        }

        @Override
        public void onTaskSucceeded() {
            release();
        }

        @Override
        public void onTaskFailed(TaskFailedReason reason) {
            release();
        }

        private void release() {
            if (held != null) {
                held.remove();
            }
        }
    }

    /** The task's settings, as Spark reads them, with the one asked per field kept. */
    static final class TaskConf extends ReadOnlySQLConf {
        private final boolean typesFramework;

        TaskConf(TaskContext task) {
            super(task);
            typesFramework = super.typesFrameworkEnabled();
        }

        @Override
        public boolean typesFrameworkEnabled() {
            return typesFramework;
        }
    }
}
