package supervision

// EventBatch is eventBatch, for the tests.
const EventBatch = eventBatch
