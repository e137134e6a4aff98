// The system zlib (zlib1g-dev), for PNG and PDF exports. deflateInit and inflateInit are macros
// in zlib.h; these wrappers let Swift call them.
#ifndef CZLIB_SHIM_H
#define CZLIB_SHIM_H
#include <zlib.h>

static inline int boardsync_deflate_init(z_stream *stream, int level) {
    return deflateInit(stream, level);
}

static inline int boardsync_inflate_init(z_stream *stream) {
    return inflateInit(stream);
}
#endif
