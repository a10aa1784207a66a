"""Ralph across machines: runs as Temporal workflows, a shared store, work moved through git."""
