from typing import Any

def walk(
    data: bytes, start: int, limit: int, batch_type: type[Any], record_type: type[Any], /
) -> tuple[list[Any], int]: ...
