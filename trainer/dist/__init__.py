"""Distributed training (between-graph replication over gRPC): roles from config or TF_CONFIG,
each role's task (servers, the ps's done queues, the watchdog, the evaluator), and the local
launcher of a whole cluster."""
