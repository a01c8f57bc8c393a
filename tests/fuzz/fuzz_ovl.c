/*
 * fuzz_ovl.c - libFuzzer target for the overlay reader: the journal (and
 * the replay of its records over a checkpoint) is untrusted input, since
 * another user may plant one.  Once per process the bundled sample is
 * copied into a scratch directory with a data file for storage 0; every
 * input is then written as that checkpoint's journal and the overlay
 * opened read-only (a read-only mount never changes the overlay, so runs
 * do not depend on each other), which streams, checks and replays it.
 *
 * The first byte picks how the rest becomes the journal:
 *   0      the file as it is (header, framing, CRCs: all the fuzzer's)
 *   1      a valid header for this checkpoint, then the bytes as they are
 *          (framing, torn tails, damage scanning)
 *   other  a valid header, then records built from (u16 length, payload)
 *          pieces with right sequence numbers and CRCs (the replay)
 */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "diag/diag.h"
#include "ovl/ovl_int.h"

#ifndef PT_FUZZ_SAMPLE
#error "PT_FUZZ_SAMPLE: the path of tests/data/sample.pt"
#endif

#define JID "00112233445566aa"

static char dir[64], ck[128], odir[128], jr[160];
static unsigned char *head;	/* the header record for the copy */
static size_t head_len;

static void put_all(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || write(fd, p, n) != (ssize_t)n)
		abort();
	close(fd);
}

static void teardown(void)
{
	char name[200];

	snprintf(name, sizeof(name), "%s/" JID ".0", odir);
	unlink(name);
	unlink(jr);
	rmdir(odir);
	unlink(ck);
	rmdir(dir);
}

static void setup(void)
{
	static char buf[1 << 16];
	char num[8][24], name[200];
	struct ovl_ident id;
	struct jrec h = { .op = JR_HEAD };
	struct ckpt *c;
	struct diag d;
	int in = open(PT_FUZZ_SAMPLE, O_RDONLY);
	ssize_t n = in < 0 ? -1 : read(in, buf, sizeof(buf));

	if (n <= 0)
		abort();
	close(in);
	/* tmpfs where there is one: every run writes the journal */
	strcpy(dir, access("/dev/shm", W_OK) ? "/tmp/fuzz_ovl.XXXXXX" :
	       "/dev/shm/fuzz_ovl.XXXXXX");
	if (!mkdtemp(dir))
		abort();
	snprintf(ck, sizeof(ck), "%s/model.pt", dir);
	snprintf(odir, sizeof(odir), "%s/.model.pt.ptfs", dir);
	snprintf(jr, sizeof(jr), "%s/" OVL_JOURNAL, odir);
	put_all(ck, buf, n);
	atexit(teardown);
	if (mkdir(odir, 0700))
		abort();
	diag_init(&d, ck);
	if (ckpt_open(ck, &c, &d) || ovl_ident_of(c->fd, c->zip.cdir_off,
						  c->zip.cdir_size, &id))
		abort();
	/* storage 0's staged copy, for the records that name it */
	snprintf(name, sizeof(name), "%s/" JID ".0", odir);
	{
		int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || ftruncate(fd, c->storages[0]->nbytes))
			abort();
		close(fd);
	}
	ckpt_close(c);
	jr_field(&h, OVL_MAGIC);
	jr_field(&h, JID);
	jr_field(&h, "1");
	snprintf(num[0], 24, "%llu", (unsigned long long)id.dev);
	snprintf(num[1], 24, "%llu", (unsigned long long)id.ino);
	snprintf(num[2], 24, "%llu", (unsigned long long)id.size);
	snprintf(num[3], 24, "%lld", (long long)id.mtime_s);
	snprintf(num[4], 24, "%lld", (long long)id.mtime_ns);
	snprintf(num[5], 24, "%lld", (long long)id.ctime_s);
	snprintf(num[6], 24, "%lld", (long long)id.ctime_ns);
	snprintf(num[7], 24, "%u", id.cdir_crc);
	for (int i = 0; i < 8; i++)
		jr_field(&h, num[i]);
	if (jr_encode(&h, 0, &head, &head_len))
		abort();
}

/* The journal file for @data, by the first byte's rule (see the top). */
static void write_journal(const uint8_t *data, size_t size)
{
	int fd = open(jr, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	uint64_t pos = 0, seq = 1;

	if (fd < 0)
		abort();
	if (data[0] != 0) {
		if (pwrite(fd, head, head_len, 0) != (ssize_t)head_len)
			abort();
		pos = head_len;
	}
	data++;
	size--;
	if (data[-1] <= 1) {
		if (size && pwrite(fd, data, size, pos) != (ssize_t)size)
			abort();
		close(fd);
		return;
	}
	while (size >= 3) {
		size_t n = data[0] | (size_t)data[1] << 8;
		struct jrec r = { 0 };
		unsigned char *p;
		size_t len, off;

		data += 2;
		size -= 2;
		n = n < size ? n : size;
		if (!n)
			break;
		/* op, then fields as the reader will split them: the
		   encoder would only re-split what the fuzzer wrote, so
		   the payload is written as it is, framed and CRC'd */
		r.op = (char)data[0];
		for (off = 1; off < n && r.nf < JR_MAXF; ) {
			size_t k = (n - off) < 255 ? n - off : 255;
			size_t fl = data[off] % (k ? k : 1);

			r.f[r.nf] = (const char *)data + off + 1;
			r.len[r.nf++] = (uint32_t)(fl < k - 1 ? fl : k - 1);
			off += 1 + r.len[r.nf - 1];
		}
		if (jr_encode(&r, seq++, &p, &len))
			abort();
		if (pwrite(fd, p, len, pos) != (ssize_t)len)
			abort();
		pos += len;
		free(p);
		data += n;
		size -= n;
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ckpt *c;	/* reused while no replay changed it */
	struct ovl_opts o = { .readonly = true };
	struct ovl *v;
	struct diag d;
	bool fresh;
	int rc;

	if (!head)
		setup();
	if (!size || size > (1u << 20))
		return 0;
	write_journal(data, size);
	diag_init(&d, ck);
	if (!c && ckpt_open(ck, &c, &d))
		abort();
	rc = ovl_open(c, ck, &o, &v, &d);
	fresh = !rc && !v->resumed && !ovl_changed(v);
	if (!rc)
		ovl_close(v);
	else if (!d.msg[0])
		abort();	/* every refusal says why */
	/* a replay (even one refused half-way) changed the model */
	if (!fresh || (rc && d.err != -ESTALE && d.err != -EPERM)) {
		ckpt_close(c);
		c = NULL;
	}
	return 0;
}
