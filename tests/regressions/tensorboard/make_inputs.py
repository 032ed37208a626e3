"""Write the hand-made seed inputs of this regression folder (run: python
tests/regressions/tensorboard/make_inputs.py).

Inputs that the fuzz tests find are added here as ``<what>.bin`` files together with their
expected outcome in ``tests/ingest/tensorboard/test_tensorboard_fuzz.py::EXPECTED``.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def _record(data: bytes) -> bytes:
    from proxydiag.ingest.tensorboard.crc import masked

    head = len(data).to_bytes(8, "little")
    return head + masked(head).to_bytes(4, "little") + data + masked(data).to_bytes(4, "little")


def main() -> None:
    from proxydiag.ingest.tensorboard.crc import masked

    # records that pass their CRC but are no Event: a varint running off the end, wire type 7,
    # a nested length pointing past its parent
    (HERE / "crc-valid-not-a-proto.bin").write_bytes(
        _record(b"\x2a" + b"\xff" * 10) + _record(b"\x0f\x01") + _record(b"\x2a\x05\x0a\x10\x0a")
    )
    # a length header of 2**63 bytes whose own CRC is valid
    head = (2**63).to_bytes(8, "little")
    (HERE / "huge-length-valid-crc.bin").write_bytes(
        head + masked(head).to_bytes(4, "little") + bytes(8)
    )
    # a tensor with a 127-element shape and a 3-byte packed float_val
    (HERE / "odd-tensor.bin").write_bytes(
        _record(b"\x2a\x13\x0a\x11\x0a\x01t\x42\x0c\x08\x01\x12\x04\x12\x02\x08\x7f\x2a\x03abc")
    )


if __name__ == "__main__":
    main()
