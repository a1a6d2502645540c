// fastmq's stand-in for Apache RocketMQ 4.9.8's transaction example, written for the interop test:
// a TransactionMQProducer sends 10 messages whose local transaction is always UNKNOW; the
// check-back answers by the message's index modulo 3 (0 unknown, 1 commit, 2 rollback).
// Prints "SENT <i> <status> <msgId>" per send and "CHECK <i> <state>" per check-back; runs until
// killed or until its time limit (args: namesrv topic group seconds).
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class TxExampleProducer {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], group = args[2];
        long limitMs = Long.parseLong(args[3]) * 1000L;
        final Map<String, Integer> indexByTx = new ConcurrentHashMap<>();
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                indexByTx.put(msg.getTransactionId(), (Integer) arg);
                return LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                Integer i = indexByTx.get(msg.getTransactionId());
                LocalTransactionState s = LocalTransactionState.COMMIT_MESSAGE;
                if (i != null) {
                    s = i % 3 == 0 ? LocalTransactionState.UNKNOW
                        : i % 3 == 1 ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
                }
                System.out.println("CHECK " + i + " " + s);
                System.out.flush();
                return s;
            }
        });
        producer.start();
        String[] tags = {"TagA", "TagB", "TagC", "TagD", "TagE"};
        for (int i = 0; i < 10; i++) {
            Message msg = new Message(topic, tags[i % tags.length], "KEY" + i,
                ("Hello RocketMQ " + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = producer.sendMessageInTransaction(msg, i);
            System.out.println("SENT " + i + " " + r.getSendStatus() + " " + r.getMsgId());
            System.out.flush();
            Thread.sleep(10);
        }
        long end = System.currentTimeMillis() + limitMs;
        while (System.currentTimeMillis() < end) {
            Thread.sleep(200);
        }
        producer.shutdown();
        System.out.println("DONE");
    }
}
