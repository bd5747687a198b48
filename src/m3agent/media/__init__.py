"""Media decoding with PyAV: sources (files, growing files, URLs, devices) cut into clips.

The submodules import PyAV and numpy only inside functions, so importing this
package is cheap.
"""

from __future__ import annotations

from m3agent.media.decode import default_video_id, iter_clips, read_audio
from m3agent.media.info import MediaInfo, probe
from m3agent.media.sources import OpenOptions

__all__ = ["MediaInfo", "OpenOptions", "default_video_id", "iter_clips", "probe", "read_audio"]
