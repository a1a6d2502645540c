// Drives the Apache RocketMQ Java client's TransactionMQProducer (4.x) in its own JVM, for
// tests/interop/test_transaction_java_client.py.
//
//   java -cp <rocketmq client classpath>:<dir of this class> TxPeer NAMESRV TOPIC GROUP COUNT SECONDS
//
// Sends COUNT transactional messages (body "tx-<i>"), the listener deciding by i % 3 as
// RocketMQ's transaction example does: 1 COMMIT_MESSAGE, 2 ROLLBACK_MESSAGE, 0 UNKNOW; a check of
// an UNKNOW one answers COMMIT_MESSAGE. Prints "SENT {json}" per message, "CHECK {json}" per
// check, and "DONE {json}" once every UNKNOW message was checked or SECONDS passed. The
// classpath is the environment's: this file is fastmq's own test peer, not part of RocketMQ.
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public final class TxPeer {
    private TxPeer() {
    }

    private static int index(Message msg) {
        String body = new String(msg.getBody(), StandardCharsets.UTF_8);
        return Integer.parseInt(body.substring(body.indexOf('-') + 1));
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        int count = Integer.parseInt(args[3]);
        long seconds = Long.parseLong(args[4]);
        Set<Integer> checked = ConcurrentHashMap.newKeySet();
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                switch (index(msg) % 3) {
                    case 1:
                        return LocalTransactionState.COMMIT_MESSAGE;
                    case 2:
                        return LocalTransactionState.ROLLBACK_MESSAGE;
                    default:
                        return LocalTransactionState.UNKNOW;
                }
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int i = index(msg);
                checked.add(i);
                System.out.println("CHECK {\"index\":" + i + ",\"topic\":\"" + msg.getTopic() + "\",\"transactionId\":\""
                    + msg.getTransactionId() + "\"}");
                System.out.flush();
                return i % 3 == 0 ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.UNKNOW;
            }
        });
        producer.start();
        int unknown = 0;
        try {
            for (int i = 0; i < count; i++) {
                Message msg = new Message(topic, "TagT", ("tx-" + i).getBytes(StandardCharsets.UTF_8));
                TransactionSendResult r = producer.sendMessageInTransaction(msg, null);
                if (r.getLocalTransactionState() == LocalTransactionState.UNKNOW) {
                    unknown++;
                }
                System.out.println("SENT {\"index\":" + i + ",\"status\":\"" + r.getSendStatus() + "\",\"state\":\""
                    + r.getLocalTransactionState() + "\",\"msgId\":\"" + r.getMsgId() + "\"}");
                System.out.flush();
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (checked.size() < unknown && System.nanoTime() < deadline) {
                Thread.sleep(100);
            }
            System.out.println("DONE {\"checked\":" + checked.size() + ",\"unknown\":" + unknown + "}");
            System.out.flush();
        } finally {
            producer.shutdown();
        }
    }
}
