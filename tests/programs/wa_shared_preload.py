# A module a warm interpreter preloads (24-warm-attacks): it keeps a buffer
# made the way Python makes one by default, mmap.mmap(-1, n): an anonymous
# MAP_SHARED mapping. Every call's child is forked from the parent with it,
# so it is the same memory in every call, not a copy-on-write copy.
import mmap

BUF = mmap.mmap(-1, 4096)
