// Drives the Apache RocketMQ Java client (4.x) with message trace on, for
// tests/interop/test_java_trace.py.
//
//   java -cp <rocketmq client classpath>:<dir of this class> TracePeer NAMESRV TOPIC PGROUP CGROUP SECONDS
//
// A DefaultMQProducer(PGROUP, true) sends one message (key "java-trace") and prints
// "SENT <msgId>"; a DefaultMQPushConsumer(CGROUP, true) consumes TOPIC from its first offset until
// it saw that message or SECONDS passed, prints "CONSUMED <msgId>", and both shut down (which
// sends the traces they hold). Prints "DONE" at the end. fastmq's own test peer, not RocketMQ's.
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public final class TracePeer {
    private TracePeer() {
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], pgroup = args[2], cgroup = args[3];
        int seconds = Integer.parseInt(args[4]);
        DefaultMQProducer producer = new DefaultMQProducer(pgroup, true);
        producer.setNamesrvAddr(namesrv);
        producer.start();
        Message msg = new Message(topic, "TagA", "java-trace", "traced by java".getBytes(StandardCharsets.UTF_8));
        SendResult sent = producer.send(msg);
        final String id = sent.getMsgId();
        System.out.println("SENT " + id);
        final CountDownLatch seen = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(cgroup, true);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (id.equals(m.getMsgId())) {
                    seen.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        if (seen.await(seconds, TimeUnit.SECONDS)) {
            System.out.println("CONSUMED " + id);
        }
        Thread.sleep(1500); // the trace dispatcher sends within 500 ms of a record
        consumer.shutdown();
        producer.shutdown();
        System.out.println("DONE");
        System.exit(0);
    }
}
