"""``rill bench``: the benchmark tool (scenarios against rill, ``compare`` against peers and the
machine's limit, JSON and HTML reports)."""
