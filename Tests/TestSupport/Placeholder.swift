// Test support: broker harness and process helpers.
