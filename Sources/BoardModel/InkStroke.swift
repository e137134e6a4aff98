import Foundation

/// One freehand stroke: a polyline drawn with one colour and width.
public struct InkStroke: Codable, Equatable, Sendable, Identifiable {
    public var id: UUID
    public var color: RGBAColor
    public var width: Double
    public var points: [CodablePoint]

    public init(id: UUID, color: RGBAColor, width: Double, points: [CodablePoint]) {
        self.id = id
        self.color = color
        self.width = width
        self.points = points
    }
}
