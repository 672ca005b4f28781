package rill.spark;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** A little-endian request payload being built, and little-endian reads of reply bytes. */
final class Wire {
    // little-endian loads of a byte[] in one instruction (the JIT's intrinsic), not byte by byte
    private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private byte[] bytes = new byte[64];
    private int length;

    byte[] bytes() {
        return bytes;
    }

    int length() {
        return length;
    }

    private void room(int more) {
        if (length + more > bytes.length) {
            bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, length + more));
        }
    }

    Wire u8(int value) {
        room(1);
        bytes[length++] = (byte) value;
        return this;
    }

    Wire u32(int value) {
        room(4);
        putInt(bytes, length, value);
        length += 4;
        return this;
    }

    Wire u64(long value) {
        room(8);
        for (int i = 0; i < 8; i++) {
            bytes[length + i] = (byte) (value >>> (8 * i));
        }
        length += 8;
        return this;
    }

    Wire raw(byte[] data) {
        room(data.length);
        System.arraycopy(data, 0, bytes, length, data.length);
        length += data.length;
        return this;
    }

    Wire str8(String text) {
        byte[] data = text.getBytes(StandardCharsets.UTF_8);
        return u8(data.length).raw(data);
    }

    /** An Iggy identifier by name: kind 2 (string), length, the UTF-8 bytes. */
    Wire ident(String name) {
        return u8(2).str8(name);
    }

    static void putInt(byte[] to, int at, int value) {
        to[at] = (byte) value;
        to[at + 1] = (byte) (value >>> 8);
        to[at + 2] = (byte) (value >>> 16);
        to[at + 3] = (byte) (value >>> 24);
    }

    static void putLong(byte[] to, int at, long value) {
        LONG.set(to, at, value);
    }

    static int getInt(byte[] from, int at) {
        return (int) INT.get(from, at);
    }

    static long getLong(byte[] from, int at) {
        return (long) LONG.get(from, at);
    }
}
