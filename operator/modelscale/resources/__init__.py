"""Pure builders of the children of a ModelDeployment: `deployment.build`, `service.build`,
`pdb.build`, and the shared `names` (labels, selector, owner reference). They return complete
dicts for server-side apply and never read the cluster or the clock."""
