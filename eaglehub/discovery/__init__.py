"""Which drafters go with a target: the Hub's model tree (``base_model`` tags), the local cache and
pairing manifests, read into one report (docs/drafters.md)."""
