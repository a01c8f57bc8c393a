/*
 * foreign.c - files that are not checkpoints but are often given as one:
 * what they are and what to do, from their first bytes, so that the
 * refusal names the format rather than four bytes in hex.  Asked by
 * formats.c's sniff() once no format has bid for the file.
 *
 *   MAGIC                         FORMAT
 *   93 'NUMPY'                    NumPy .npy (numpy/lib/format.py)
 *   89 'HDF' 0d 0a 1a 0a          HDF5 (Keras .h5 models)
 *   1f 8b / 28 b5 2f fd / fd '7zXZ' 00 / 'BZh'   gzip, zstd, xz, bzip2
 *   [EF BB BF] blanks '{' '"' | '[' value        JSON text
 */
#include "foreign.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *magic;
	size_t len;
	const char *what;
} magics[] = {
	{ "\x93NUMPY", 6, "NumPy .npy array, not a checkpoint (numpy.load "
	  "reads it; torch.save(torch.from_numpy(a)) makes one)" },
	{ "\x89HDF\r\n\x1a\n", 8, "HDF5 file, not a checkpoint (a Keras "
	  ".h5 model? h5ls lists it)" },
	{ "\x1f\x8b", 2, "gzip-compressed file, not a checkpoint "
	  "(gunzip it first)" },
	{ "\x28\xb5\x2f\xfd", 4, "zstd-compressed file, not a checkpoint "
	  "(unzstd it first)" },
	{ "\xfd" "7zXZ\0", 6, "xz-compressed file, not a checkpoint "
	  "(unxz it first)" },
	{ "BZh", 3, "bzip2-compressed file, not a checkpoint (bunzip2 it "
	  "first)" },
};

static bool blank(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* JSON text: an object whose first member's name opens, or an array
 * whose first value opens; a '{' alone is not enough. */
static bool is_json(const unsigned char *h, size_t n)
{
	size_t i = n >= 3 && !memcmp(h, "\xef\xbb\xbf", 3) ? 3 : 0;
	unsigned char open;

	while (i < n && blank(h[i]))
		i++;
	if (i >= n || (h[i] != '{' && h[i] != '['))
		return false;
	open = h[i++];
	while (i < n && blank(h[i]))
		i++;
	if (i >= n)
		return false;
	if (open == '{')
		return h[i] == '"' || h[i] == '}';
	return strchr("{[\"]-0123456789tfn", h[i]) != NULL;
}

bool ckpt_foreign(const unsigned char *h, size_t n, char *buf, size_t size)
{
	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++)
		if (n >= magics[i].len &&
		    !memcmp(h, magics[i].magic, magics[i].len)) {
			snprintf(buf, size, "%s", magics[i].what);
			return true;
		}
	if (is_json(h, n)) {
		snprintf(buf, size, "JSON text, not a checkpoint (a config or "
			 "index file? give a sharded model's folder to open "
			 "its shards)");
		return true;
	}
	return false;
}
