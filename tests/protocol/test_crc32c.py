from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tributary.protocol import crc32c as crc_module
from tributary.protocol.crc32c import IMPLEMENTATION, crc32c, crc32c_crcmod, crc32c_hardware

# The CRC catalogue's check value for CRC-32C: the CRC of the ASCII digits 1-9.
CHECK_INPUT = b"123456789"
CHECK_VALUE = 0xE3069283


def _implementations() -> list[crc_module.CrcFunction]:
    return [f for f in (crc32c_crcmod, crc32c_hardware) if f is not None]


@pytest.mark.parametrize("fn", _implementations())
def test_check_value(fn: crc_module.CrcFunction) -> None:
    assert fn(CHECK_INPUT) == CHECK_VALUE


def test_public_function_check_value_and_empty_input() -> None:
    assert crc32c(CHECK_INPUT) == CHECK_VALUE
    assert crc32c(b"") == 0


def test_implementation_names_the_live_function() -> None:
    if crc32c_hardware is None:
        assert IMPLEMENTATION == "crcmod"
        assert crc32c is crc32c_crcmod
    else:
        assert IMPLEMENTATION.startswith("crc32c (")
        assert crc32c is crc32c_hardware


def test_hardware_package_is_installed_in_the_test_environment() -> None:
    # The venv pins it; without this the agreement test below would test nothing.
    assert crc32c_hardware is not None


@pytest.mark.parametrize("fn", _implementations())
def test_accepts_every_buffer_type(fn: crc_module.CrcFunction) -> None:
    assert fn(bytearray(CHECK_INPUT)) == CHECK_VALUE
    assert fn(memoryview(CHECK_INPUT)) == CHECK_VALUE
    assert fn(memoryview(b"xx" + CHECK_INPUT + b"yy")[2:-2]) == CHECK_VALUE


@given(st.binary(max_size=4096), st.integers(0, 2**32 - 1))
def test_implementations_agree(data: bytes, start: int) -> None:
    assert crc32c_hardware is not None
    assert crc32c_crcmod(data) == crc32c_hardware(data)
    assert crc32c_crcmod(data, start) == crc32c_hardware(data, start)


@given(st.binary(max_size=512), st.binary(max_size=512))
def test_value_continues_a_running_crc(a: bytes, b: bytes) -> None:
    for fn in _implementations():
        assert fn(b, fn(a)) == fn(a + b)
