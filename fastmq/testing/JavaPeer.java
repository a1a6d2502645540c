// Drives the Apache RocketMQ Java client (4.x) in its own JVM, for fastmq.testing.java_peer
// (tests/interop/test_java_rocketmq.py, benchmarks/test_client_benchmarks.py).
//
//   java -cp <rocketmq client classpath>:<dir of this class> JavaPeer produce NAMESRV TOPIC COUNT [batch] [size=N] [warm=N]
//   java -cp ... JavaPeer consume NAMESRV TOPIC GROUP EXPECT SECONDS [orderly] [fail=BODY] [sql=EXPR]
//
// produce sends COUNT messages (body "java-<i>", tags "TagJ", keys "key-<i>", user properties
// userProp=value-<i> and n=<i>), synchronously one by one or as one batch, and prints one
// "SENT {json}" line per message and "RESULT {json}" at the end (with the timed sends' elapsed
// time and, one by one, their p50 and p99; "warm=N" sends N untimed messages first). consume subscribes TOPIC "*"
// in clustering mode from the first offset, concurrently or (orderly) with queues locked on the
// broker, and prints "MSG {json}" per delivery and "DONE {json}" once EXPECT distinct bodies were
// consumed or SECONDS passed. The first delivery of body BODY is refused (RECONSUME_LATER, or
// SUSPEND_CURRENT_QUEUE_A_MOMENT when orderly), so that it must come again. "sql=EXPR" subscribes
// with MessageSelector.bySql(EXPR) instead of "*"; a start that fails (the broker refused the
// expression) prints "DONE" with complete false and the error. The classpath is the
// environment's: this file is fastmq's own test peer, not part of RocketMQ.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public final class JavaPeer {
    private JavaPeer() {
    }

    private static String q(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    private static int bodySize = 0;  // "size=N": bodies padded with 'x' to N bytes
    private static int warm = 0;  // "warm=N": N sends before the timed ones
    private static long timerMs = -1;  // "timer=MS": each message due MS after it is made (RocketMQ 5's TIMER_DELIVER_MS)

    private static Message message(String topic, int i) {
        StringBuilder body = new StringBuilder("java-" + i);
        while (body.length() < bodySize) {
            body.append('x');
        }
        Message m = new Message(topic, "TagJ", "key-" + i, body.toString().getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("userProp", "value-" + i);
        m.putUserProperty("n", String.valueOf(i));
        if (timerMs >= 0) {  // 4.9.8 does not reserve the name: a user property reaches the broker as it is
            m.putUserProperty("TIMER_DELIVER_MS", String.valueOf(System.currentTimeMillis() + timerMs));
        }
        return m;
    }

    private static void printSent(SendResult r) {
        System.out.println("SENT {\"status\": " + q(r.getSendStatus().name()) + ", \"msg_id\": " + q(r.getMsgId())
            + ", \"offset_msg_id\": " + q(r.getOffsetMsgId()) + ", \"queue_id\": " + r.getMessageQueue().getQueueId()
            + ", \"queue_offset\": " + r.getQueueOffset() + ", \"broker\": " + q(r.getMessageQueue().getBrokerName())
            + "}");
    }

    private static void produce(String namesrv, String topic, int count, boolean batch) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("PG_JAVA_PEER");
        p.setNamesrvAddr(namesrv);
        p.setInstanceName("java-peer-" + ProcessHandle.current().pid());
        p.setSendMsgTimeout(10000);
        p.start();
        int ok = 0;
        int failed = 0;
        String error = null;
        long[] took = new long[count];
        for (int i = 0; i < warm; i++) {  // untimed: the JIT compiles the send path first
            p.send(message(topic, -1 - i));
        }
        long began = System.nanoTime();
        try {
            if (batch) {
                List<Message> msgs = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    msgs.add(message(topic, i));
                }
                SendResult r = p.send(msgs);
                printSent(r);
                ok = count;
            } else {
                for (int i = 0; i < count; i++) {
                    try {
                        long t0 = System.nanoTime();
                        SendResult r = p.send(message(topic, i));
                        took[ok] = System.nanoTime() - t0;
                        printSent(r);
                        ok++;
                    } catch (Exception e) {
                        failed++;
                        error = e.toString();
                    }
                }
            }
        } catch (Exception e) {
            failed = count - ok;
            error = e.toString();
        }
        long elapsed = System.nanoTime() - began;  // the sends alone, without the JVM's start or the shutdown
        p.shutdown();
        long[] sorted = java.util.Arrays.copyOf(took, batch ? 0 : ok);
        java.util.Arrays.sort(sorted);
        long p50 = sorted.length > 0 ? sorted[sorted.length / 2] / 1000 : -1;
        long p99 = sorted.length > 0 ? sorted[(int) (sorted.length * 0.99)] / 1000 : -1;
        System.out.println("RESULT {\"ok\": " + ok + ", \"failed\": " + failed + ", \"error\": " + q(error)
            + ", \"elapsed_us\": " + elapsed / 1000 + ", \"p50_us\": " + p50 + ", \"p99_us\": " + p99 + "}");
    }

    private static void consume(String namesrv, String topic, String group, int expect, int seconds, boolean orderly,
                                String fail, String sql) throws Exception {
        Set<String> bodies = ConcurrentHashMap.newKeySet();
        Set<String> refused = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("java-peer-" + ProcessHandle.current().pid());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setConsumeMessageBatchMaxSize(1);
        if (sql != null) {
            c.subscribe(topic, MessageSelector.bySql(sql));
        } else {
            c.subscribe(topic, "*");
        }
        if (orderly) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) ->
                handle(msgs, fail, refused, bodies, expect, done) ? ConsumeOrderlyStatus.SUCCESS
                    : ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT);
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) ->
                handle(msgs, fail, refused, bodies, expect, done) ? ConsumeConcurrentlyStatus.CONSUME_SUCCESS
                    : ConsumeConcurrentlyStatus.RECONSUME_LATER);
        }
        try {
            c.start();
        } catch (Exception e) {
            c.shutdown();
            System.out.println("DONE {\"complete\": false, \"distinct\": 0, \"error\": " + q(e.getMessage()) + "}");
            return;
        }
        boolean complete = done.await(seconds, TimeUnit.SECONDS);
        Thread.sleep(500);  // let the consumed offsets reach the broker before shutdown persists them
        c.shutdown();
        System.out.println("DONE {\"complete\": " + complete + ", \"distinct\": " + bodies.size() + "}");
    }

    /** Print the deliveries; false when one of them is to be refused this time. */
    private static boolean handle(List<MessageExt> msgs, String fail, Set<String> refused, Set<String> bodies,
                                  int expect, CountDownLatch done) {
        boolean ok = true;
        for (MessageExt m : msgs) {
            String body = new String(m.getBody(), StandardCharsets.UTF_8);
            boolean refuse = body.equals(fail) && refused.add(body);
            synchronized (JavaPeer.class) {
                System.out.println("MSG {\"msg_id\": " + q(m.getMsgId()) + ", \"topic\": " + q(m.getTopic())
                    + ", \"tags\": " + q(m.getTags()) + ", \"keys\": " + q(m.getKeys())
                    + ", \"body\": " + q(body) + ", \"body_len\": " + m.getBody().length
                    + ", \"user_prop\": " + q(m.getUserProperty("userProp"))
                    + ", \"queue_id\": " + m.getQueueId() + ", \"queue_offset\": " + m.getQueueOffset()
                    + ", \"reconsume_times\": " + m.getReconsumeTimes() + ", \"refused\": " + refuse + "}");
            }
            if (refuse) {
                ok = false;
            } else {
                bodies.add(body);
            }
        }
        if (bodies.size() >= expect) {
            done.countDown();
        }
        return ok;
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 4 && args[0].equals("produce")) {
            boolean batch = false;
            for (int i = 4; i < args.length; i++) {
                if (args[i].equals("batch")) {
                    batch = true;
                } else if (args[i].startsWith("size=")) {
                    bodySize = Integer.parseInt(args[i].substring(5));
                } else if (args[i].startsWith("warm=")) {
                    warm = Integer.parseInt(args[i].substring(5));
                } else if (args[i].startsWith("timer=")) {
                    timerMs = Long.parseLong(args[i].substring(6));
                }
            }
            produce(args[1], args[2], Integer.parseInt(args[3]), batch);
        } else if (args.length >= 6 && args[0].equals("consume")) {
            boolean orderly = false;
            String fail = null;
            String sql = null;
            for (int i = 6; i < args.length; i++) {
                if (args[i].equals("orderly")) {
                    orderly = true;
                } else if (args[i].startsWith("fail=")) {
                    fail = args[i].substring(5);
                } else if (args[i].startsWith("sql=")) {
                    sql = args[i].substring(4);
                }
            }
            consume(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]), orderly, fail,
                sql);
        } else {
            System.err.println("usage: JavaPeer produce NAMESRV TOPIC COUNT [batch] [size=N] [warm=N] [timer=MS] | "
                + "consume NAMESRV TOPIC GROUP EXPECT SECONDS [orderly] [fail=BODY] [sql=EXPR]");
            System.exit(2);
        }
        System.exit(0);
    }
}
