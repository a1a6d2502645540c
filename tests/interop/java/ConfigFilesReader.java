import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Map;

import org.apache.rocketmq.broker.subscription.SubscriptionGroupManager;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.protocol.body.TopicConfigSerializeWrapper;
import org.apache.rocketmq.common.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;

/**
 * Reads a broker's topics.json and subscriptionGroup.json as Apache RocketMQ 4.9.8's broker does
 * at start (TopicConfigManager.decode, SubscriptionGroupManager.decode: fastjson into these classes)
 * and prints one line per entry, sorted, for the fastmq test to compare with what it wrote.
 */
public class ConfigFilesReader {
    public static void main(String[] args) throws Exception {
        String topics = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
        TopicConfigSerializeWrapper w = TopicConfigSerializeWrapper.fromJson(topics, TopicConfigSerializeWrapper.class);
        System.out.println("dataVersion " + w.getDataVersion().getCounter());
        for (Map.Entry<String, TopicConfig> e : new java.util.TreeMap<>(w.getTopicConfigTable()).entrySet()) {
            TopicConfig t = e.getValue();
            System.out.println("topic " + e.getKey() + " " + t.getReadQueueNums() + " " + t.getWriteQueueNums() + " "
                + t.getPerm() + " " + t.isOrder());
        }
        String groups = new String(Files.readAllBytes(Paths.get(args[1])), StandardCharsets.UTF_8);
        SubscriptionGroupManager s = RemotingSerializable.fromJson(groups, SubscriptionGroupManager.class);
        for (Map.Entry<String, SubscriptionGroupConfig> e
                : new java.util.TreeMap<>(s.getSubscriptionGroupTable()).entrySet()) {
            SubscriptionGroupConfig g = e.getValue();
            System.out.println("group " + e.getKey() + " " + g.getRetryMaxTimes() + " " + g.getBrokerId());
        }
    }
}
