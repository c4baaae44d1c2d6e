"""The plan, handed to other tools: Kubernetes manifests as plain data. Pure."""
