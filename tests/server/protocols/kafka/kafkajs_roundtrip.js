// kafkajs 2.2.4 against rill's Kafka listener: create a topic, produce gzip-compressed keyed
// messages with a header, consume them in a consumer group (JoinGroup/SyncGroup/OffsetCommit),
// print one line per message. Usage: node kafkajs_roundtrip.js HOST:PORT TOPIC
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');

async function main(broker, topic) {
  const kafka = new Kafka({ clientId: 'rill-test', brokers: [broker], logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic, compression: CompressionTypes.GZIP,
    messages: [0, 1, 2, 3, 4].map(i => ({ key: `k${i}`, value: `v${i}`, partition: i % 2,
                                          headers: { via: 'kafkajs' } })),
  });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `group-${topic}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const lines = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${lines.length} of 5 arrived`)), 30000);
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        lines.push(`${partition} ${message.offset} ${message.key}=${message.value} ${message.headers.via}`);
        if (lines.length === 5) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await consumer.disconnect();
  console.log(lines.sort().join('\n'));
}

main(process.argv[2], process.argv[3]).catch(error => {
  console.error(error.stack || String(error));
  process.exit(1);
});
