package stutter.ycsb;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;

import java.util.HashMap;
import java.util.Map;
import org.junit.Test;

public class RecordCodecTest {
  @Test
  public void roundTripWithEveryEscapedCharacter() {
    Map<String, String> r = new HashMap<>();
    r.put("field0", "a b\tc\r\nd;e=f%g ~!");
    r.put("field1", "");
    String enc = RecordCodec.encode(r);
    assertFalse(enc.contains(" "));
    assertFalse(enc.contains("\n"));
    assertEquals(r, RecordCodec.decode(enc));
  }

  @Test
  public void garbageIsRejected() {
    assertNull(RecordCodec.decode("novalue"));
    assertNull(RecordCodec.decode("k=%4"));
    assertNull(RecordCodec.decode("k=%zz"));
  }

  @Test
  public void encodingIsCanonical() {
    Map<String, String> a = new HashMap<>();
    a.put("b", "2");
    a.put("a", "1");
    assertEquals("a=1;b=2", RecordCodec.encode(a));
  }
}
