"""The cluster's peer protocol: what rill nodes say to each other (``codec``)."""
