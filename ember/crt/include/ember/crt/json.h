/*
 * json.h -- a small JSON reader for the executors' artifacts (graph JSON, AOT metadata).
 *
 * Two steps, neither of which allocates or recurses:
 *  1. ember_json_validate checks that text[0, len) is exactly one JSON value (RFC 8259), no
 *     longer than EMBER_CRT_MAX_JSON_BYTES and nested at most EMBER_CRT_MAX_JSON_DEPTH deep,
 *     with an explicit fixed-size stack. It reports the byte offset of the first problem.
 *  2. The readers below then walk the validated text by byte position: find a key of an
 *     object, step through an array, read an integer or a string. They assume validated
 *     text and stay within it.
 * Strings are returned raw (between the quotes, escapes not decoded); keys are compared raw.
 */
#ifndef EMBER_CRT_JSON_H_
#define EMBER_CRT_JSON_H_

#include <stddef.h>
#include <stdint.h>

#include "crt_config.h"
#include "error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef EMBER_CRT_MAX_JSON_DEPTH
#define EMBER_CRT_MAX_JSON_DEPTH 32
#endif
#ifndef EMBER_CRT_MAX_JSON_BYTES
#define EMBER_CRT_MAX_JSON_BYTES (64u * 1024u * 1024u)
#endif

/*! \brief Validated JSON text (not owned). Positions index into text. */
typedef struct {
  const char* text;
  size_t len;
} EmberJson;

/*!
 * \brief Check that text is one JSON value; on success fill *out.
 * \return 0, or kTvmErrorExecutorBadArtifact with "<what>: <problem> at byte <n>".
 */
tvm_crt_error_t ember_json_validate(const char* what, const char* text, size_t len,
                                    EmberJson* out);

/*! \brief The first byte of the value at pos: '{', '[', '"', 't', 'f', 'n' or a number's. */
char ember_json_kind(const EmberJson* j, size_t pos);
/*! \brief The position just past the value at pos (and the whitespace after it). */
size_t ember_json_skip(const EmberJson* j, size_t pos);
/*! \brief The value of key in the object at obj. \return 1 if found, 0 if not an object
 * or no such key. */
int ember_json_find(const EmberJson* j, size_t obj, const char* key, size_t* value);
/*! \brief The first element of the array at arr. \return 1, or 0 if empty / not an array. */
int ember_json_first(const EmberJson* j, size_t arr, size_t* elem);
/*! \brief The element after elem. \return 1, or 0 at the end of the array. */
int ember_json_next(const EmberJson* j, size_t elem, size_t* next);
/*! \brief Elements of the array at arr (0 if not an array). */
uint32_t ember_json_count(const EmberJson* j, size_t arr);
/*! \brief An integer: a JSON number without fraction or exponent, or a string holding one
 * (TVM writes node attrs as strings). \return 0, or -1 if it is not one or overflows. */
int ember_json_int(const EmberJson* j, size_t pos, int64_t* out);
/*! \brief true/false. \return 0, or -1 if not a boolean. */
int ember_json_bool(const EmberJson* j, size_t pos, int* out);
/*! \brief The raw bytes of a string (no quotes). \return 0, or -1 if not a string. */
int ember_json_string(const EmberJson* j, size_t pos, const char** s, uint32_t* n);
/*! \brief 1 if the value at pos is the string lit (raw comparison). */
int ember_json_string_is(const EmberJson* j, size_t pos, const char* lit);
/*!
 * \brief Decode the string at pos (escapes, \\uXXXX to UTF-8) into out[0, cap).
 * \return its decoded length (which may exceed cap: nothing past cap is written), or
 * (size_t)-1 if the value is not a string.
 */
size_t ember_json_unescape(const EmberJson* j, size_t pos, char* out, size_t cap);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* EMBER_CRT_JSON_H_ */
