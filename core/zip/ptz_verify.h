/*
 * ptz_verify.h - what ptverify checks in a torch zip archive beyond what
 * ptz_reader_open() refuses: each record's local header, data descriptor
 * and CRC-32, a storage record's compression and alignment, the bytes
 * between the records and after the end, the records torch reads
 * (version, byteorder, .storage_alignment, and the layout
 * .format_version promises) and data/ records no storage uses.
 *
 * Each problem goes to a callback as one line, with the name of its check
 * and an offset in the archive; nothing is printed, and no problem stops
 * the walk.
 */
#ifndef PT_ZIP_PTZ_VERIFY_H
#define PT_ZIP_PTZ_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

struct ptz_entry;
struct ptz_reader;

/* A problem: @check names its kind ("record", "crc", "gap", ...), @off
 * is where in the archive (or DIAG_NO_OFFSET), @msg is one line. */
typedef void (*ptz_problem_fn)(void *arg, const char *check, uint64_t off,
			       const char *msg);

/* A storage of the model and the record it is read from. */
struct ptz_use {
	struct ptz_entry *rec;	/* its data/<key> record, or NULL */
	const char *key;	/* the storage's key ("0") */
	uint64_t nbytes;	/* the bytes it holds */
	uint64_t pkl_off;	/* where the pickle first names it */
};

struct ptz_verify {
	const struct ptz_reader *z;
	bool no_crc;		/* do not read record data for CRC-32s */
	bool big_endian;	/* the byteorder record says "big" */
	const struct ptz_use *uses;	/* the model's storages, in its
					   order (borrowed); NULL: not
					   known, their checks skipped */
	uint32_t nuses;
	ptz_problem_fn problem;
	/* with each chunk of record data read for a CRC-32, or NULL */
	void (*step)(void *arg, uint64_t n);
	void *arg;		/* for @problem and @step */
};

/* The checks of each record, in central directory order; each record is
 * located (ptz_entry_locate()) on the way. */
void ptz_verify_records(const struct ptz_verify *v);

/* The checks of the archive, after ptz_verify_records(): the bytes that
 * belong to no record, the records torch reads, unused storage records. */
void ptz_verify_archive(const struct ptz_verify *v);

#endif
