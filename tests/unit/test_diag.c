/*
 * test_diag.c - the diagnostics path: first failure wins, errno values, and
 * the one-line format "path: offset 0x..: message".
 */
#include "test_util.h"

#include "diag/diag.h"

#include <errno.h>

Test(diag, formats_path_offset_and_message)
{
	struct diag d;
	char line[256];

	diag_init(&d, "model.pt");
	cr_assert_eq(diag_corrupt(&d, 0x1f40, "bad central directory "
				  "signature 0x%08x", 0x02014b51), -EILSEQ);
	cr_assert(diag_failed(&d));
	cr_assert_str_eq(diag_line(&d, line, sizeof(line)),
			 "model.pt: offset 0x1f40: bad central directory "
			 "signature 0x02014b51");
	assert_no_leaks();
}

Test(diag, first_failure_wins)
{
	struct diag d;
	char line[256];

	diag_init(&d, "a.pt");
	cr_assert_eq(diag_unsupported(&d, 7, "first"), -ENOTSUP);
	cr_assert_eq(diag_corrupt(&d, 9, "second"), -EILSEQ);
	cr_assert_eq(d.err, -ENOTSUP);
	cr_assert_str_eq(diag_line(&d, line, sizeof(line)),
			 "a.pt: offset 0x7: first");
	assert_no_leaks();
}

Test(diag, leaves_out_unknown_parts)
{
	struct diag d;
	char line[256];

	diag_init(&d, NULL);
	cr_assert_not(diag_failed(&d));
	diag_errno(&d, -ENOENT, "no such file");
	cr_assert_str_eq(diag_line(&d, line, sizeof(line)), "no such file");
	diag_init(&d, "x.pt");
	diag_nomem(&d);
	cr_assert_eq(d.err, -ENOMEM);
	cr_assert_str_eq(diag_line(&d, line, sizeof(line)), "x.pt: out of memory");
	assert_no_leaks();
}

Test(diag, truncates_long_messages)
{
	struct diag d;
	char line[32], big[1000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	diag_init(&d, "f");
	diag_corrupt(&d, 1, "%s", big);
	cr_assert_lt(strlen(d.msg), sizeof(d.msg));
	cr_assert_eq(strlen(diag_line(&d, line, sizeof(line))), sizeof(line) - 1);
	assert_no_leaks();
}

Test(diag, stays_one_line_whatever_the_file_holds)
{
	struct diag d;

	/* a version record "\xcc\n" quoted into the message */
	diag_init(&d, "f");
	diag_corrupt(&d, 0, "version record '%s' is bad", "\xcc\n\t\x7f");
	cr_assert_str_eq(d.msg, "version record '\xcc?" "?" "?' is bad");
	assert_no_leaks();
}
