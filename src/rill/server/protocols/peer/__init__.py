"""The cluster's peer protocol on a node's ``[cluster] peer_address`` listener (``handler``)."""
