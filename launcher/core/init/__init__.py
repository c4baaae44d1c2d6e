"""From the nodes' facts to a spec: links, drafts, decisions, the commented file."""
