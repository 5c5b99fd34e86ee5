// The test targets' support: what the bench shares with them (a real broker, child processes,
// the HAP peer, temporary directories) comes from Harness and is re-exported here, beside the
// test-only helpers (subscribers and collectors that await a message with a timeout).
@_exported public import Harness
