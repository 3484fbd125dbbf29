package bus

// QueueGroup is the queue group of every operation's subscriptions, so
// replicas of a service share the load. Subjects are declared with their
// operations in proto/api.
const QueueGroup = "router"
