MAX_LINE: int

def scan(
    buf: bytes, pos: int, end: int, needles: tuple[bytes, ...], want_rates: bool, /
) -> tuple[int, int, int, list[bytes], list[bytes], list[tuple[bytes, bytes]], int, int, int]: ...
