/*
 * json_out.h - the tools' JSON writers are core/util/json_out.h (moved
 * there so that `ptfs status -j` writes JSON the same way; fs/ may not
 * link tools/).  This name stays so the tools' includes need not change.
 */
#ifndef PT_TOOLS_JSON_OUT_H
#define PT_TOOLS_JSON_OUT_H

#include "util/json_out.h"

#endif
