"""``rill bench``: the benchmark tool (scenarios against rill, ``compare`` against peers and
what the machine itself measures, JSON and HTML reports)."""
