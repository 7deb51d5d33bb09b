// Prints the metadata record schemas compiled into Kafka's jars, one line a field:
// "<apiKey> <version> <path> <TYPE>" (nested fields as a.b, tagged fields as tag<N>:name), so
// the tests can compare zkcdc's own layouts (capture/kraft/message_layouts.py) with Kafka's.
import java.util.Map;
import org.apache.kafka.common.metadata.MetadataRecordType;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;

public class MetadataSchemas {
    public static void main(String[] args) throws Exception {
        for (MetadataRecordType type : MetadataRecordType.values()) {
            Object record = type.newMetadataRecord();
            Schema[] schemas = (Schema[]) record.getClass().getField("SCHEMAS").get(null);
            for (short v = type.lowestSupportedVersion(); v <= type.highestSupportedVersion(); v++) {
                if (schemas[v] != null) print(type.id() + " " + v + " ", "", schemas[v]);
            }
        }
    }

    @SuppressWarnings("unchecked")
    static void print(String prefix, String path, Schema schema) throws Exception {
        for (BoundField bound : schema.fields()) {
            Type type = bound.def.type;
            if (type instanceof TaggedFields) {
                java.lang.reflect.Field inner = TaggedFields.class.getDeclaredField("fields");
                inner.setAccessible(true);
                for (Map.Entry<Integer, Field> e : ((Map<Integer, Field>) inner.get(type)).entrySet()) {
                    field(prefix, path + "tag" + e.getKey() + ":" + e.getValue().name, e.getValue().type);
                }
            } else {
                field(prefix, path + bound.def.name, type);
            }
        }
    }

    static void field(String prefix, String path, Type type) throws Exception {
        Type element = type.arrayElementType().orElse(null);
        if (element instanceof Schema) {
            System.out.println(prefix + path + " " + (type.isNullable() ? "COMPACT_NULLABLE_ARRAY" : "COMPACT_ARRAY"));
            print(prefix, path + ".", (Schema) element);
        } else if (type instanceof Schema) {
            System.out.println(prefix + path + " STRUCT");
            print(prefix, path + ".", (Schema) type);
        } else {
            System.out.println(prefix + path + " " + type);
        }
    }
}
