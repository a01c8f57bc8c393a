"""writers.py MOUNT - whose close() applies a replacement of m/epoch
(an int): writer a opens without truncating and closes after writer b
truncated; readers open and close in the middle of b's writes.  Only b's
close may apply, so epoch reads 91 and nothing is refused.  Before the
fix, a's release applied b's empty file ('' refused) and a reader's
close applied half of it (the reader got EINVAL)."""
import os, sys
m = sys.argv[1]
p = m + "/epoch"
a = os.open(p, os.O_WRONLY)                 # a writer that writes nothing
b = os.open(p, os.O_WRONLY | os.O_TRUNC)    # the next one truncates
os.close(a)                                 # a's close and release
r = os.open(p, os.O_RDONLY); os.close(r)    # a reader's close
os.write(b, b"9")
r = os.open(p, os.O_RDONLY); os.close(r)    # a reader's close mid-write
os.write(b, b"1\n")
os.close(b)
print(open(p).read().strip())
