"""Pure decisions of the reconcile pass: status, conditions, replicas to apply."""
