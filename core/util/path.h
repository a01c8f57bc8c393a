/*
 * path.h - util_abs_path() (path.c).
 */
#ifndef PT_UTIL_PATH_H
#define PT_UTIL_PATH_H

/*
 * @path made absolute against the current directory: the directory part
 * resolved (realpath), the last name kept as given, so a name that does
 * not exist is fine.  malloc'd; NULL with errno set.
 */
char *util_abs_path(const char *path);

#endif
