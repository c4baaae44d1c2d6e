"""The copies `sync` makes: model files and container images, node to node or through a relay."""
