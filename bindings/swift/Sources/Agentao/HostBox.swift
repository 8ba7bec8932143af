/// The one ownership pattern of every host capability: the box a vtable carries as `userdata`
/// is passed to C retained, and the library owns that reference from the registration call on.
/// It calls `userdata_free` (``releaseHostBox``) exactly once, when it lets go, and also when
/// the registration fails, so Swift never releases a box it handed over.
func retainHostBox(_ box: AnyObject) -> UnsafeMutableRawPointer {
    Unmanaged.passRetained(box).toOpaque()
}

/// The `userdata_free` of every capability: releases the reference ``retainHostBox`` made.
let releaseHostBox: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ud in
    Unmanaged<AnyObject>.fromOpaque(ud!).release()
}
