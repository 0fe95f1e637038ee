# Print three scores and exit at once, without reading the batch: a run
# that can be over before its executor has seen it start.
print("[0.5, 0.25, 0.125]")
