/*
 * fixtures.h - walk the shared fixture checkpoints (../shared/fixtures:
 * torch-1.13, torch-2, real), read in place and never copied.
 */
#ifndef PT_TESTS_FIXTURES_H
#define PT_TESTS_FIXTURES_H

/*
 * Call @fn(path, @arg) for every checkpoint file (.pt .pth .bin .ptl) in
 * the fixture folders; a missing folder is logged and skipped.  Returns
 * the number of files visited.
 */
unsigned for_each_fixture(void (*fn)(const char *path, void *arg), void *arg);

#endif
