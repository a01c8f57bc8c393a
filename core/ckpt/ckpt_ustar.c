/*
 * ckpt_ustar.c - the tar container of tar-era checkpoints (ckpt_tar.c):
 * walk the 512-byte headers, with bounds checks, and note where the data
 * of the members torch wrote lie, so they can be read in place.
 * POSIX.1-1988 ustar, with the GNU and pax extensions Python's tarfile
 * writes; numbers in octal:
 *
 *   OFFSET | SIZE | FIELD
 *   0      | 100  | name (NUL-padded)
 *   124    | 12   | size (octal; base-256 when byte 0 has bit 7 set)
 *   148    | 8    | checksum: sum of the header with this field as spaces
 *   156    | 1    | type: '0' or NUL file, 'x' pax header for the next
 *          |      | member, 'g' global pax, 'L' GNU long name; others skip
 *   257    | 6    | magic "ustar"
 *   345    | 155  | prefix: the name is prefix/name when set
 *
 * Data follows the header, padded to 512; a zero block (or the end of
 * the file) ends the archive.
 */
#include "ckpt_int.h"
#include "util/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK		512
#define NAME_MAX_TAR	4096			/* GNU long name, pax path */
#define PAX_MAX		(1u << 20)		/* one pax header */

const char *const ckpt_tar_names[CKPT_TAR_N] = {
	"sys_info", "pickle", "storages", "tensors",
};

struct walk {
	struct ckpt *c;
	struct diag *d;
};

/* An octal (or base-256) number field; false if it is neither. */
static bool number(const unsigned char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (p[0] & 0x80) {
		/* base-256: big-endian, the first byte's top bit is the flag */
		if (p[0] != 0x80)
			return false;	/* negative, or too large */
		for (i = 1; i < n; i++) {
			if (v >> 56)
				return false;
			v = v << 8 | p[i];
		}
		*out = v;
		return true;
	}
	while (i < n && p[i] == ' ')
		i++;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v >> 61)
			return false;
		v = v << 3 | (uint64_t)(p[i] - '0');
	}
	for (; i < n; i++)
		if (p[i] != ' ' && p[i] != 0)
			return false;
	*out = v;
	return true;
}

static bool checksum_ok(const unsigned char *h)
{
	uint64_t want;
	unsigned long sum = 0;
	long ssum = 0;

	if (!number(h + 148, 8, &want))
		return false;
	for (int i = 0; i < BLOCK; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];

		sum += c;
		ssum += (signed char)c;	/* old tars summed signed chars */
	}
	return want == sum || (long)want == ssum;
}

/*
 * The records of a pax header: "LEN key=value\n" ...  Takes path= as the
 * next member's name and size= as its size.
 */
static int pax(struct walk *t, const char *p, size_t n, uint64_t off,
	       char *name, uint64_t *size, bool *has_size)
{
	size_t i = 0;

	while (i < n) {
		size_t len = 0, j = i;

		while (j < n && p[j] >= '0' && p[j] <= '9' && len < n)
			len = len * 10 + (size_t)(p[j++] - '0');
		if (j == i || j >= n || p[j] != ' ' || len < j - i + 2 ||
		    len > n - i || p[i + len - 1] != '\n')
			return diag_corrupt(t->d, off + i, "bad pax record");
		j++;
		if (!strncmp(p + j, "path=", 5) && i + len - 1 - (j + 5) <
		    NAME_MAX_TAR) {
			memcpy(name, p + j + 5, i + len - 1 - (j + 5));
			name[i + len - 1 - (j + 5)] = 0;
		} else if (!strncmp(p + j, "size=", 5)) {
			uint64_t v = 0;
			size_t k = j + 5;

			for (; k < i + len - 1 && p[k] >= '0' && p[k] <= '9';
			     k++) {
				if (v > UINT64_MAX / 10 - 9)
					return diag_corrupt(t->d, off + i,
							    "pax size overflows");
				v = v * 10 + (uint64_t)(p[k] - '0');
			}
			if (k != i + len - 1)
				return diag_corrupt(t->d, off + i,
						    "bad pax size");
			*size = v;
			*has_size = true;
		}
		i += len;
	}
	return 0;
}

/* Which member @name is, or -1; "./x" is "x". */
static int which(const char *name)
{
	if (!strncmp(name, "./", 2))
		name += 2;
	for (int i = 0; i < CKPT_TAR_N; i++)
		if (!strcmp(name, ckpt_tar_names[i]))
			return i;
	return -1;
}

int ckpt_tar_members(struct ckpt *c, struct ckpt_tar_member *m,
		     struct diag *d)
{
	struct walk w = { .c = c, .d = d }, *t = &w;
	uint64_t pos = 0, size = c->file_size;
	char *name = malloc(NAME_MAX_TAR + 1), *ext = NULL;
	unsigned char h[BLOCK];
	uint64_t xsize = 0;
	bool has_xsize = false;
	int rc = 0;

	if (!name)
		return diag_nomem(t->d);
	name[0] = 0;
	while (!rc && pos < size) {
		uint64_t len, data, next;
		bool zero = true;

		/* a block cut short ends the archive, as for tarfile: what
		   members it would have added are missing below */
		if (size - pos < BLOCK)
			break;
		rc = io_pread_diag(t->c->fd, h, BLOCK, pos, NULL, t->d);
		for (int i = 0; !rc && i < BLOCK && zero; i++)
			zero = !h[i];
		if (rc || zero)
			break;	/* the end-of-archive block */
		if (!checksum_ok(h)) {
			rc = diag_corrupt(t->d, pos, "bad tar header checksum");
			break;
		}
		if (!number(h + 124, 12, &len)) {
			rc = diag_corrupt(t->d, pos + 124, "bad tar size field");
			break;
		}
		if (has_xsize && h[156] != 'x' && h[156] != 'g' &&
		    h[156] != 'L')
			len = xsize;
		data = pos + BLOCK;
		if (len > size - data) {
			rc = diag_corrupt(t->d, pos, "tar member of %llu bytes "
					  "runs past the end of the file",
					  (unsigned long long)len);
			break;
		}
		next = data + (len + BLOCK - 1) / BLOCK * BLOCK;
		switch (h[156]) {
		case 'L':	/* GNU: the data is the next member's name */
		case 'x':	/* pax: records for the next member */
			if (len > (h[156] == 'L' ? NAME_MAX_TAR : PAX_MAX)) {
				rc = diag_unsupported(t->d, pos, "tar extension "
						      "header of %llu bytes",
						      (unsigned long long)len);
				break;
			}
			free(ext);
			ext = malloc(len + 1);
			if (!ext) {
				rc = diag_nomem(t->d);
				break;
			}
			rc = io_pread_diag(t->c->fd, ext, len, data, NULL, t->d);
			ext[len] = 0;
			if (rc)
				break;
			if (h[156] == 'L')
				snprintf(name, NAME_MAX_TAR + 1, "%s", ext);
			else
				rc = pax(t, ext, len, data, name, &xsize,
					 &has_xsize);
			pos = next;
			continue;
		case '0': case 0: case '7': {
			int k;

			if (!name[0]) {
				/* ustar: prefix/name, both NUL-padded */
				if (!memcmp(h + 257, "ustar", 5) && h[345])
					snprintf(name, NAME_MAX_TAR + 1,
						 "%.155s/%.100s",
						 (const char *)h + 345,
						 (const char *)h);
				else
					snprintf(name, NAME_MAX_TAR + 1,
						 "%.100s", (const char *)h);
			}
			k = which(name);
			if (k >= 0) {
				m[k].off = data;
				m[k].size = len;
				m[k].found = true;
			}
			break;
		}
		default:	/* directories, links, global pax: nothing */
			break;
		}
		name[0] = 0;
		has_xsize = false;
		pos = next;
	}
	free(name);
	free(ext);
	if (rc)
		return rc;
	for (int i = CKPT_TAR_PICKLE; i < CKPT_TAR_N; i++)
		if (!m[i].found)
			return diag_corrupt(t->d, 0, "tar archive without a "
					    "'%s' member: not a tar-era torch "
					    "checkpoint", ckpt_tar_names[i]);
	return 0;
}
