import Foundation

// Core Foundation names that Apple's SecItem code uses, mapped onto swift-corelibs-foundation classes so
// that the same source compiles on Linux: `[...] as CFDictionary`, `kSecClass as String`,
// `var result: CFTypeRef?`, `kCFBooleanTrue`. On Apple platforms these types are toll-free bridged to the
// same Foundation classes, so code that casts between them behaves the same here.

/// Apple's result code type.
public typealias OSStatus = Int32
/// Any Core Foundation object.
public typealias CFTypeRef = AnyObject
/// A Core Foundation string (`NSString` here, toll-free bridged on Apple platforms).
public typealias CFString = NSString
/// A Core Foundation dictionary.
public typealias CFDictionary = NSDictionary
/// A Core Foundation mutable dictionary.
public typealias CFMutableDictionary = NSMutableDictionary
/// A Core Foundation array.
public typealias CFArray = NSArray
/// Core Foundation data.
public typealias CFData = NSData
/// A Core Foundation number.
public typealias CFNumber = NSNumber
/// A Core Foundation boolean (an `NSNumber` holding a Bool).
public typealias CFBoolean = NSNumber
/// A Core Foundation date.
public typealias CFDate = NSDate
/// A Core Foundation allocator; SecItem calls accept nil only.
public typealias CFAllocator = AnyObject
/// A Core Foundation error (`NSError` here, toll-free bridged on Apple platforms). The SecKey functions
/// report failures as errors of `NSOSStatusErrorDomain` whose code is the `OSStatus`.
public typealias CFError = NSError
/// Core Foundation's index and length type.
public typealias CFIndex = Int

/// The Core Foundation boolean true.
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
/// The Core Foundation boolean false.
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)
/// The Core Foundation null value.
public let kCFNull: NSNull = NSNull()
