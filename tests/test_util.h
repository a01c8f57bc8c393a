/*
 * test_util.h - helpers shared by the Criterion tests: leak checks that
 * actually fail a test (LeakSanitizer alone only prints; see
 * ../shared/style.md), and building byte buffers for malformed inputs.
 */
#ifndef PT_TESTS_TEST_UTIL_H
#define PT_TESTS_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#if defined(PT_SANITIZE)
#include <sanitizer/lsan_interface.h>
#define assert_no_leaks() \
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "memory leaked")
#else
#define assert_no_leaks() ((void)0)
#endif

static inline void put_le16(unsigned char *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static inline void put_le32(unsigned char *p, uint32_t v)
{
	put_le16(p, v);
	put_le16(p + 2, v >> 16);
}

static inline void put_le64(unsigned char *p, uint64_t v)
{
	put_le32(p, v);
	put_le32(p + 4, v >> 32);
}

#endif
