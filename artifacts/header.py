"""The format name and version that open every file this application writes and reads back."""

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Header:
    """`format` names what a file holds, `version` the layout of its fields. A reader accepts
    exactly its own version, so a file of another layout is refused before a field is read."""

    format: str
    version: int
    name: str  # what the file is, as a message calls it: "agent snapshot"

    def fields(self) -> dict:
        return {"format": self.format, "version": self.version}

    def check(
        self,
        path: str | os.PathLike,
        payload,
        error: type[Exception] = ValueError,
        remedy: str = "",
    ) -> None:
        """Raise `error`, one line, unless `payload` is a dict that carries this header."""
        if not isinstance(payload, dict) or payload.get("format") != self.format:
            article = "an" if self.name[0] in "aeiou" else "a"
            raise error(
                f"{path} is not {article} {self.name} of this application "
                f"(format must be {self.format!r})"
            )
        if payload.get("version") != self.version:
            raise error(
                f"{self.name} {path} has format version {payload.get('version')!r}; "
                f"this version of the application reads version {self.version}"
                + (f"; {remedy}" if remedy else "")
            )
