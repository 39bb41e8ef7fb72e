"""Launch plans for big targets (``eaglehub verify --dry-run``): the target's memory footprint from its
config (:mod:`eaglehub.plan.memory`), the tensor- and pipeline-parallel sizes and executor backend that
fit it on the given GPUs (:mod:`eaglehub.plan.launch`), and the files a plan reads
(:mod:`eaglehub.plan.inputs`); docs/verify.md, "Launch plans (--dry-run)"."""
