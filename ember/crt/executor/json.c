/*
 * json.c -- validate JSON iteratively, then read it by position (see json.h).
 *
 * The validator is a loop over one byte position with a stack of open containers
 * (EMBER_CRT_MAX_JSON_DEPTH bytes), so neither deep nesting nor a long document can
 * overflow the C stack. The readers assume validated text.
 */
#include "ember/crt/json.h"

#include "../src/backend/internal.h"

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static size_t ws(const char* s, size_t n, size_t i) {
  while (i < n && is_ws(s[i])) ++i;
  return i;
}

static tvm_crt_error_t fail(const char* what, const char* problem, size_t at) {
  ember_crt_error(kTvmErrorExecutorBadArtifact, what);
  ember_crt_error_append(": malformed JSON: ");
  ember_crt_error_append(problem);
  ember_crt_error_append(" at byte ");
  ember_crt_error_append_u64(at);
  return kTvmErrorExecutorBadArtifact;
}

/* Past the string starting at s[i] == '"'; 0 on a bad string (0 is never a valid end). */
static size_t scan_string(const char* s, size_t n, size_t i) {
  for (++i; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"') return i + 1;
    if (c < 0x20u) return 0;
    if (c == '\\') {
      if (++i >= n) return 0;
      switch (s[i]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          break;
        case 'u':
          if (i + 4 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2]) || !is_hex(s[i + 3]) ||
              !is_hex(s[i + 4])) {
            return 0;
          }
          i += 4;
          break;
        default:
          return 0;
      }
    }
  }
  return 0;
}

/* Past the number or literal at s[i]; 0 if it is neither. */
static size_t scan_scalar(const char* s, size_t n, size_t i) {
  static const char* const kWords[] = {"true", "false", "null"};
  size_t k, start = i;
  for (k = 0; k < 3; ++k) {
    const char* w = kWords[k];
    size_t m = 0;
    while (w[m] != '\0' && i + m < n && s[i + m] == w[m]) ++m;
    if (w[m] == '\0') return i + m;
  }
  if (i < n && s[i] == '-') ++i;
  if (i >= n || !is_digit(s[i])) return 0;
  if (s[i] == '0') {
    ++i;
  } else {
    while (i < n && is_digit(s[i])) ++i;
  }
  if (i < n && s[i] == '.') {
    if (++i >= n || !is_digit(s[i])) return 0;
    while (i < n && is_digit(s[i])) ++i;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= n || !is_digit(s[i])) return 0;
    while (i < n && is_digit(s[i])) ++i;
  }
  return i > start ? i : 0;
}

/* A key and its colon at s[*i]; 0 on success. */
static int scan_key(const char* what, const char* s, size_t n, size_t* i) {
  size_t end;
  if (*i >= n || s[*i] != '"') return fail(what, "expected a string key", *i);
  end = scan_string(s, n, *i);
  if (end == 0) return fail(what, "bad string", *i);
  *i = ws(s, n, end);
  if (*i >= n || s[*i] != ':') return fail(what, "expected ':' after a key", *i);
  *i = ws(s, n, *i + 1);
  return 0;
}

tvm_crt_error_t ember_json_validate(const char* what, const char* s, size_t n, EmberJson* out) {
  char stack[EMBER_CRT_MAX_JSON_DEPTH];
  uint32_t depth = 0;
  size_t i, end;
  if (s == NULL) return fail(what, "no text (NULL)", 0);
  if (n > EMBER_CRT_MAX_JSON_BYTES) return fail(what, "document larger than the limit", n);
  i = ws(s, n, 0);
  for (;;) {
    /* a value starts at i */
    if (i >= n) return fail(what, "unexpected end, expected a value", i);
    if (s[i] == '{' || s[i] == '[') {
      char close = s[i] == '{' ? '}' : ']';
      if (depth == EMBER_CRT_MAX_JSON_DEPTH) return fail(what, "nested too deeply", i);
      stack[depth++] = s[i];
      i = ws(s, n, i + 1);
      if (i < n && s[i] == close) {
        --depth;
        i = ws(s, n, i + 1);
      } else {
        if (stack[depth - 1] == '{' && scan_key(what, s, n, &i) != 0) {
          return kTvmErrorExecutorBadArtifact;
        }
        continue;
      }
    } else {
      end = s[i] == '"' ? scan_string(s, n, i) : scan_scalar(s, n, i);
      if (end == 0) return fail(what, s[i] == '"' ? "bad string" : "unexpected character", i);
      i = ws(s, n, end);
    }
    /* after a value: close containers, or go on to the next element */
    for (;;) {
      char close;
      if (depth == 0) {
        if (i != n) return fail(what, "trailing characters after the value", i);
        out->text = s;
        out->len = n;
        return 0;
      }
      close = stack[depth - 1] == '{' ? '}' : ']';
      if (i < n && s[i] == close) {
        --depth;
        i = ws(s, n, i + 1);
        continue;
      }
      if (i < n && s[i] == ',') {
        i = ws(s, n, i + 1);
        if (stack[depth - 1] == '{' && scan_key(what, s, n, &i) != 0) {
          return kTvmErrorExecutorBadArtifact;
        }
        break;
      }
      return fail(what, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'", i);
    }
  }
}

/* ---- readers of validated text --------------------------------------------------------- */

char ember_json_kind(const EmberJson* j, size_t pos) {
  return pos < j->len ? j->text[pos] : '\0';
}

size_t ember_json_skip(const EmberJson* j, size_t pos) {
  const char* s = j->text;
  size_t n = j->len, i = pos;
  uint32_t depth = 0;
  if (i >= n) return n;
  if (s[i] == '"') return ws(s, n, scan_string(s, n, i));
  if (s[i] != '{' && s[i] != '[') return ws(s, n, scan_scalar(s, n, i));
  for (; i < n; ++i) {
    if (s[i] == '"') {
      i = scan_string(s, n, i) - 1;
    } else if (s[i] == '{' || s[i] == '[') {
      ++depth;
    } else if ((s[i] == '}' || s[i] == ']') && --depth == 0) {
      return ws(s, n, i + 1);
    }
  }
  return n;
}

static int raw_equal(const char* s, size_t n, const char* lit) {
  size_t i;
  for (i = 0; i < n; ++i) {
    if (lit[i] == '\0' || lit[i] != s[i]) return 0;
  }
  return lit[n] == '\0';
}

int ember_json_find(const EmberJson* j, size_t obj, const char* key, size_t* value) {
  const char* s = j->text;
  size_t n = j->len, i;
  if (ember_json_kind(j, obj) != '{') return 0;
  i = ws(s, n, obj + 1);
  while (i < n && s[i] == '"') {
    size_t end = scan_string(s, n, i);
    int match = raw_equal(s + i + 1, end - i - 2, key);
    i = ws(s, n, ws(s, n, end) + 1); /* past ':' */
    if (match) {
      *value = i;
      return 1;
    }
    i = ember_json_skip(j, i);
    if (i < n && s[i] == ',') i = ws(s, n, i + 1);
  }
  return 0;
}

int ember_json_first(const EmberJson* j, size_t arr, size_t* elem) {
  size_t i;
  if (ember_json_kind(j, arr) != '[') return 0;
  i = ws(j->text, j->len, arr + 1);
  if (i >= j->len || j->text[i] == ']') return 0;
  *elem = i;
  return 1;
}

int ember_json_next(const EmberJson* j, size_t elem, size_t* next) {
  size_t i = ember_json_skip(j, elem);
  if (i >= j->len || j->text[i] != ',') return 0;
  *next = ws(j->text, j->len, i + 1);
  return 1;
}

uint32_t ember_json_count(const EmberJson* j, size_t arr) {
  uint32_t count = 0;
  size_t e;
  int more = ember_json_first(j, arr, &e);
  while (more) {
    ++count;
    more = ember_json_next(j, e, &e);
  }
  return count;
}

int ember_json_int(const EmberJson* j, size_t pos, int64_t* out) {
  const char* s = j->text;
  size_t i = pos, n = j->len;
  uint64_t value = 0, limit = (uint64_t)INT64_MAX;
  int neg = 0, quoted = 0, digits = 0;
  if (i < n && s[i] == '"') quoted = 1, ++i;
  if (i < n && s[i] == '-') neg = 1, ++i, limit += 1u;
  for (; i < n && is_digit(s[i]); ++i, ++digits) {
    uint64_t d = (uint64_t)(s[i] - '0');
    if (value > (limit - d) / 10u) return -1;
    value = value * 10u + d;
  }
  if (digits == 0) return -1;
  if (quoted ? (i >= n || s[i] != '"') : (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E'))) {
    return -1;
  }
  *out = neg ? (int64_t)(0u - value) : (int64_t)value;
  return 0;
}

int ember_json_bool(const EmberJson* j, size_t pos, int* out) {
  char c = ember_json_kind(j, pos);
  if (c != 't' && c != 'f') return -1;
  *out = c == 't';
  return 0;
}

int ember_json_string(const EmberJson* j, size_t pos, const char** s, uint32_t* n) {
  size_t end;
  if (ember_json_kind(j, pos) != '"') return -1;
  end = scan_string(j->text, j->len, pos);
  *s = j->text + pos + 1;
  *n = (uint32_t)(end - pos - 2);
  return 0;
}

int ember_json_string_is(const EmberJson* j, size_t pos, const char* lit) {
  const char* s;
  uint32_t n;
  return ember_json_string(j, pos, &s, &n) == 0 && raw_equal(s, n, lit);
}

static uint32_t hex4(const char* s) {
  uint32_t v = 0;
  int k;
  for (k = 0; k < 4; ++k) {
    char c = s[k];
    v = v * 16u + (uint32_t)(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

static size_t put(char* out, size_t cap, size_t len, uint32_t byte) {
  if (len < cap) out[len] = (char)byte;
  return len + 1;
}

size_t ember_json_unescape(const EmberJson* j, size_t pos, char* out, size_t cap) {
  const char* s = j->text;
  size_t i, end, len = 0;
  if (ember_json_kind(j, pos) != '"') return (size_t)-1;
  end = scan_string(s, j->len, pos) - 1;
  for (i = pos + 1; i < end; ++i) {
    uint32_t cp;
    if (s[i] != '\\') {
      len = put(out, cap, len, (unsigned char)s[i]);
      continue;
    }
    switch (s[++i]) {
      case 'b': cp = '\b'; break;
      case 'f': cp = '\f'; break;
      case 'n': cp = '\n'; break;
      case 'r': cp = '\r'; break;
      case 't': cp = '\t'; break;
      case 'u':
        cp = hex4(s + i + 1);
        i += 4;
        /* a surrogate pair makes one code point; a lone surrogate is kept as is */
        if (cp >= 0xD800u && cp < 0xDC00u && i + 6 < end && s[i + 1] == '\\' &&
            s[i + 2] == 'u') {
          uint32_t lo = hex4(s + i + 3);
          if (lo >= 0xDC00u && lo < 0xE000u) {
            cp = 0x10000u + ((cp - 0xD800u) << 10) + (lo - 0xDC00u);
            i += 6;
          }
        }
        break;
      default: cp = (unsigned char)s[i]; break;
    }
    if (cp < 0x80u) {
      len = put(out, cap, len, cp);
    } else if (cp < 0x800u) {
      len = put(out, cap, len, 0xC0u | (cp >> 6));
      len = put(out, cap, len, 0x80u | (cp & 0x3Fu));
    } else if (cp < 0x10000u) {
      len = put(out, cap, len, 0xE0u | (cp >> 12));
      len = put(out, cap, len, 0x80u | ((cp >> 6) & 0x3Fu));
      len = put(out, cap, len, 0x80u | (cp & 0x3Fu));
    } else {
      len = put(out, cap, len, 0xF0u | (cp >> 18));
      len = put(out, cap, len, 0x80u | ((cp >> 12) & 0x3Fu));
      len = put(out, cap, len, 0x80u | ((cp >> 6) & 0x3Fu));
      len = put(out, cap, len, 0x80u | (cp & 0x3Fu));
    }
  }
  return len;
}
