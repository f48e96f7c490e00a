package stutter.ycsb;

import java.util.Map;
import java.util.TreeMap;

/**
 * A YCSB record (field name to string) as one value of the line protocol:
 * {@code name=value;name=value}, sorted by name, with {@code %}, space, tab,
 * CR, LF, {@code ;} and {@code =} escaped as {@code %XX} so that the value is
 * one space-free token.
 */
public final class RecordCodec {
  private RecordCodec() {}

  static String escape(String s) {
    StringBuilder b = new StringBuilder(s.length() + 8);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '%' || c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '=') {
        b.append('%').append(String.format("%02X", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.toString();
  }

  /** The unescaped string, or null if an escape is truncated or not hex. */
  static String unescape(String s) {
    StringBuilder b = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c != '%') {
        b.append(c);
        continue;
      }
      if (i + 2 >= s.length()) {
        return null;
      }
      try {
        b.append((char) Integer.parseInt(s.substring(i + 1, i + 3), 16));
      } catch (NumberFormatException e) {
        return null;
      }
      i += 2;
    }
    return b.toString();
  }

  public static String encode(Map<String, String> record) {
    StringBuilder b = new StringBuilder();
    for (Map.Entry<String, String> e : new TreeMap<>(record).entrySet()) {
      if (b.length() > 0) {
        b.append(';');
      }
      b.append(escape(e.getKey())).append('=').append(escape(e.getValue()));
    }
    return b.toString();
  }

  /** The record, or null if {@code value} is not an encoded record. */
  public static Map<String, String> decode(String value) {
    Map<String, String> record = new TreeMap<>();
    for (String part : value.split(";", -1)) {
      int eq = part.indexOf('=');
      if (eq < 0) {
        return null;
      }
      String k = unescape(part.substring(0, eq));
      String v = unescape(part.substring(eq + 1));
      if (k == null || v == null) {
        return null;
      }
      record.put(k, v);
    }
    return record;
  }
}
